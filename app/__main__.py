from app.main import entry

entry()
