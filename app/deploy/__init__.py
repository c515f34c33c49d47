"""What ``compose.yaml`` deploys: the kiln and Redis images, and how their builds reach PyPI."""
