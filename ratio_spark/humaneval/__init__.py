"""The human evaluation (the paper's §5.3 and appendix G): a study database, blind A/B assignment, the
annotation web app, the analyses of Tables 2, 11 and 12, and the labels as qrels. Plain Python."""
