"""Compression of DeFINE tables (compositional codes, paper Table 5)."""
