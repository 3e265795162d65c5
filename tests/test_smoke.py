def test_login_page_renders(client):
    response = client.get("/login")
    assert response.status_code == 200
    assert b"Log in" in response.data


def test_logged_in_index_shows_empty_state(client, user):
    response = client.get("/")
    assert b"Start your first chat" in response.data
