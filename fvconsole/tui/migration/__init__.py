"""View 2, Migration: the form, the panels, the elastic-resume panel and their wording."""
