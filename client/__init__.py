"""Weir clients: the weir command line."""
