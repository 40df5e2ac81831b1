"""Tasks and sets: eval tasks, their rows and metrics, the looks' order, and the data sets they read."""
