"""Email: the mails Loopdesk sends (letters.py) and sending them (sender.py), knowing
nothing of the web. SMTP_URL names the server; without one, each mail is written to the
log instead (what `make run` shows)."""
