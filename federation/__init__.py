"""Several Swarms behind one front door (DESIGN 12): placement across clusters."""
