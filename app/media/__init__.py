"""Media generation: image providers (an OpenAI-compatible images API, or a local draft
renderer) behind one small interface, chosen from the settings."""
