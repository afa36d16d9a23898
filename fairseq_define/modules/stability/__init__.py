"""What keeps DeFINE stable under SGD (docs/stability.md): --define-unit-grad-scale."""
