pytest_plugins = ["eaglefuzz.harness.pytest_plugin"]
