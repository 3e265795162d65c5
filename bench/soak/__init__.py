"""The soak (issue 36): `python -m bench.soak` (`make soak`). See bench/soak/run.py; the
traffic is bench/soak/locustfile.py (imported by Locust only), the verdict judge.py."""
