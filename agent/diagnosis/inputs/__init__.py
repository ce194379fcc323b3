"""Where a diagnosis' facts come from: live series, /proc of flagged processes, artifacts."""
