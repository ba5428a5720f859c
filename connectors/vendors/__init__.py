"""The kinds runonce ships, one module per vendor, each built from the toolkit alone; a vendor's
errors are read in one function of its module. ``sandbox/``: local servers that speak the
vendors' protocols and count every effect."""
