"""The human study: the pairs people label (Label Studio), their labels in the stores, the
export and import around them, and their agreement with the judge."""
