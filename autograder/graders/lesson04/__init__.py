"""Hidden graders of lesson 04 (the Transformer block and the GPT model)."""
