"""Hidden graders of lesson 03 (causal multi-head self-attention)."""
