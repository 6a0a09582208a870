"""Whether certificate.json (the repro certificate: one run rerun, compared step by step) belongs to
the results being analysed; a certificate made for another configuration is never shown as current."""

from __future__ import annotations

from harness.analysis.identity.run_identity import hashes





def certificate_for(cert, results):
    """The certificate when it was made for these results; otherwise a 'not certified' record.

    A certificate belongs to a config_hash (and a seed and arm). One whose config_hash matches no
    result of its arm here is stale: its claim is never shown as current.
    """
    if not isinstance(cert, dict):
        return cert
    arm = cert.get("arm")
    current = sorted({hashes(r)[0] for r in results if str(r.get("arm")) == str(arm)} - {None})
    made_for = cert.get("config_hash")
    if made_for is not None and made_for in current:
        return cert
    if made_for is None:
        why = "certificate.json records no config_hash, so it cannot be tied to these results"
    elif not current:
        why = f"certificate.json is for arm {arm}, which has no results here"
    else:
        why = (f"certificate.json was made for config_hash {made_for} (seed {cert.get('seed')}, arm {arm}); "
               f"the results here have {', '.join(current)}")
    return {
        "stale": True,
        "reproducible": None,
        "line": f"bitwise reproducible: not certified for these results ({why}; run the same command "
                f"again with repro.certificate=true, the default: resume keeps every finished unit and "
                f"reruns the first one for a certificate of these results)",
        "previous": cert,
    }
