"""Command-line drivers built on xDSL's tools (`lanec opt`)."""
