"""What several test modules share: builders of upstream responses and readers of what the client
got, per surface. Test modules import from here, never from one another."""
