"""A stand-in for Slack on 127.0.0.1: several workspaces, each with its members, channels and
bot token, the OAuth install of the app, the Web API methods the town uses, and the events Slack
sends an app (signed), over HTTP or Socket Mode (``server``)."""
