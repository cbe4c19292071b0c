"""Retrievers: each scores a query against its candidate documents (``score(query, docs)``)."""
