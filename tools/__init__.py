"""Developer tools: the core build (make core), the local distributed stack (make up/down)."""
