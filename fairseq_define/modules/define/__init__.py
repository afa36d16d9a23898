"""The DeFINE unit and embedding (paper section 3): settings, styles, schedules, units, the embedding."""
