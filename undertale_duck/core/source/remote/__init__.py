"""Remote sources through fsspec: the client, the store, listing, and the node's shard cache."""
