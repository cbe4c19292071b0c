"""Retrievers: each kind scores a query against its candidate documents (``score(query, docs)``); the registry of entries, model discovery and the document-side indexes."""
