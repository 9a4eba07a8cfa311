"""What the functions that events invoke do with each batch."""
