import json
import re

from transformer.visualization.attention_page import encode_script_json, render_attention_page


def test_encode_script_json_round_trips() -> None:
    payload = {"tokens": ["</script>", "<!--", "&", "\u2028"], "weights": [0.1234, 1.0]}
    text = encode_script_json(payload)
    assert not set("<>&\u2028") & set(text)
    assert json.loads(text) == payload


def test_the_page_holds_the_escaped_title_and_the_data_once() -> None:
    payload = {"title": "<b>x</b> & y", "kinds": [], "tokens": ["</script>"]}
    page = render_attention_page(payload)
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</html>\n")
    assert (
        "<title>&lt;b&gt;x&lt;/b&gt; &amp; y</title>" in page
        and "<h1>&lt;b&gt;x&lt;/b&gt; &amp; y</h1>" in page
    )
    found = re.findall(r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S)
    assert len(found) == 1 and json.loads(found[0]) == payload
