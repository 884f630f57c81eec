"""Transport: authenticated gRPC servers and channels, and batched peer streams. No protocol decisions."""
