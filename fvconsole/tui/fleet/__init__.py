"""View 4, Fleet: the form, the node table and key matrix, the fleet eviction, their wording."""
