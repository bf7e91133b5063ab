"""Hidden graders of lesson 01 (a character tokenizer, the train/validation split, batches)."""
