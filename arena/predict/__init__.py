"""What a Blackwell kernel would take on a B200, predicted from the work its emulated run issued (b200.py)."""
