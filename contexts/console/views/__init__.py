"""Console views, one module per page (NetBox style: full page or HTMX partial per view)."""
