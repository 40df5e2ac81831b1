"""The result contract: result.json (contract.py) and the records one stage hands the next."""
