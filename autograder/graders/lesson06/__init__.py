"""Hidden graders of lesson 06 (generating text: sampling, context cropping, KV cache)."""
