"""Training glue: the chunked sampler, the resumable loader, collate and the DataModule."""
