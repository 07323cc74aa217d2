"""A fake OpenAI-compatible server answered by the offline brain (``bottown fake-llm``)."""
