"""Packing images into RecordIO: im2rec-compatible lists and records, and the parallel packer."""
