"""Hidden graders of lesson 05 (training the model: optimizer, schedule, step, evaluation)."""
