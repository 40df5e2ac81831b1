"""The pick: the fixed sequence over the candidates and the recommendation along it. Pure."""
