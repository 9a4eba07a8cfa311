"""What the functions invoked by events rather than routes do with each batch they are given."""
