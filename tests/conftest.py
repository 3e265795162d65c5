pytest_plugins = ["tests.fake_model"]
