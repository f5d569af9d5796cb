"""Model providers: chat models, their errors, retries, prices and context windows."""
