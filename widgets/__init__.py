"""Front-end sources of labkit's custom widget views (plain ESM + CSS), shipped as labkit._widgets."""
