"""The scheduling core: pure code that reads a ClusterReader and returns Decision objects."""
