"""The differential corpus: small programs run eagerly and compiled, compared."""
