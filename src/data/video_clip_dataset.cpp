// placeholder: filled in by issue 13's work
