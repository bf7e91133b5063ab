"""Hidden graders of lesson 02 (embeddings and the bigram model)."""
