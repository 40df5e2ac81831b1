"""A model: its source, and what is resolved or checked against its tokenizer and layers."""
