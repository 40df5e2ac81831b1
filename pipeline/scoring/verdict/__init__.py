"""The sequential design and the verdict: the margin rule, looks, the second arithmetic's check, rows and their judgement. Pure."""
