//! Keys made for these tests only (with Python's `cryptography`), and the
//! JWKS an identity provider would publish for them.

pub(super) const RSA_PRIVATE: &str = "\
-----BEGIN RSA PRIVATE KEY-----\n\
MIIEowIBAAKCAQEAnNwzTwOZIMzgr7MBLOIUtsbOA82zSHAXI0Hj4MPxr0h6ssGS\n\
Ek4wxUgIWPDSoU88yA5rGrPIj1jZbgP9DzFetyF78Mm9I2SDjxlfj2ZytrQQTLfj\n\
RawTYNTjf5MoUfUp2EaV1NY2KV2s+87N+jDUxMLSDmK0mC/1kjH2MpuBXeNbJwBx\n\
XLa+HpiCoyy75MQGIoiVtt+iL4gmJs/N7JUsZUsKErHboTa3xtgNGATFZz+UtacS\n\
Q5Id+DCrk+TcTkMxJuheoMLhRlyxTANK1GOa5PPu/FTjOeQ6+nky8YNHpuuUqTx+\n\
0f0pqhGrkQWkrU3rCP5ExIdfgbyVDv9fcl+uhwIDAQABAoIBAANLarZ3pGE4fGWk\n\
VFt9eiLmpRAWY3QbipjeeutPIkXkt1MG1ssUoliabTZ1BG+H6wZmqyA583XzT0nM\n\
wqVti4g8J07E5fiW1V6NkWDBLZqhyI/b8uWVOij3/7k/vYKPLCxTOzVntGaFBaua\n\
SeA941Iop2HO9+0UYMuLyhiBBKQUqHtsfavzPG+DFjjUo22tFoscSRmcrG8ctcT9\n\
dQKUlNGZScCy7mxggl9ImOkl/ZQabhA20gNftdwjqD0oedLrOXB8grNh8reEDkT+\n\
IbYy2b3RTD+Y9/2rTI/t0BlQ1Hql6axPs1io56jg3JDzNw669Uz7m91f0twXvheU\n\
hT2ysuECgYEAzQZvjhZ6NsdcY8WcqWEYiyBgctD2HNqxNTV4VDXffhLvR3bjgls8\n\
qtVDXAFSXruSk1h6stEsImzBlYgUmybWLHNlX+fZxaAWSU3KNds+qnVr7NWFb1Wp\n\
TD+8EouJfTQ1eWaxOIaEbrI41v/iRRjZG0P8UCkWPEHLKnPgzmu0VaECgYEAw9wh\n\
d/m5J+MuCR8NpyVgHkLQ904aPR5SLJrRwa47C+25VdA3xqojkgzVGOmFuVIgGGYH\n\
aesmbWRIPTqj5uF9IcSJv5oyRa/8/AX1oGVfWQR+O3Pbtfs816AqwYZxOjm6mm2H\n\
VvdE+AJxn1Gqw71eZTbvwgYop8Z60gsOyqONwycCgYEAkti1NfPrfSi1h9CWMMsW\n\
pS9/ZT09ydTpb87obIhZlxdAwtLoiQmIHmO5Z0CbGrcGePq6hzFChzWWQd/Bwo7C\n\
f/v29AY/+Eh9LevFlWV/MOABeRRGCkQ0iiRsNGw1AbRPSLDA5leSqyaDh5qnGg5+\n\
EgVTxqZnAqmtNq7gqXiDJYECgYAQtXvpd1VzcK8huhN5GfgsPLkFEBWu9yI9ieux\n\
IUMKTnqMNpo7iZJFSHD5khqFZ9szGakyQQxjMrXy+0i2TrBVLCYwQWBej5f+jCeb\n\
Smqq9nYqbkTlLozPPGvJXMXWGMyxlfyAz9GDcvnshJQT5Njju58Sp2HahlU+DBFz\n\
+iYC6wKBgAF5QW+50mlMus4T5u6KWPCjYf8gbxdJxYSkWJtuK7Ku9STkYmikz7I9\n\
1620YQEyTAM1JMuI0L47fRDn98Gr0OO7L0yj0oltKEOnRa23yRVredu/NKKKYElI\n\
V+yyLl3QNKIGtIv8tt+D1ePSfgFvpyD+JwIMxWskTU9hTfwccuqU\n\
-----END RSA PRIVATE KEY-----\n";

pub(super) const RSA_OTHER_PRIVATE: &str = "\
-----BEGIN RSA PRIVATE KEY-----\n\
MIIEowIBAAKCAQEArDRXdArCB0zmBcsAucDeOwKG18VNEIiks66S2IXSxiQYBVnY\n\
zQWeHVDcauY0ZXWRLL7cvbc1pmDMkNWvpCLRHaH2iNOoAn5HEpemCTgtD58Y7g02\n\
DRUAW3pvXp+2sOce5vpx/FiBAxdS8Rvz8AC3GKUf/Ff0UZPNs48dGTMsyCbzAz3x\n\
lhWKvCbC2TwocgCJrHaC5pI1qDQpm26Cd0q5EXPcxXK9fVZevIU4EJWRBJR/zhJr\n\
GmQg7Tb6qc/TmiXIuK30+7eL/EuXSS9ON4JxYVuCs8EB/W9i6xoReoTdySdp86Kn\n\
L7o5mlKbW8MtfbF1NSkMdvvIPrWZOkJHwQbr+QIDAQABAoH/IaIXcpKnUsWyJ29+\n\
tMj2no/fxkTCyHfnszBlfeSlRg3Go0TpEyIFv7QLWNWdZjOQJy0f7+3YjKZbTe5u\n\
X6BtN1xqyk6MgfAn8Xms9CAErQhl1hi+dc+kQjmnhtOq2uJJJtPDb4XZrMDhcjYD\n\
bty05htaI+8JyOUVR/yrskBMfsrKpAZaYTxpKdwKhGMpHZeHe5LGglWyQSljf5UE\n\
af6yR9VnTq/i/DlK/Iu5QQKWKscekh29npPXxhcfQT77/czFSDTPxCnabmKYoCnB\n\
lbzh/+VeIFmvf9iNfmxCjnpGNUPrhe6u/RLu77qUjTQocz8CkADwl1v2lNzpZX5u\n\
cbAhAoGBANXbVwEf8k0cny+/FE7Tpn2qacB7Mf3FAdbqWg6DEGEbBIHDcjdl6Ync\n\
vPKo6MpxNi1UWzVwifyptAAnF4ui2FF08n5ZXleVTILg1+Cagg3kWun3re6vkmS3\n\
cXZPBWh7VWbjQcz7T3AbuaRVE0xMj3zm5VaoOGnu4x8IGjgjiiYVAoGBAM4juOQm\n\
UmSJql35PfriLckQ4npRNjTezb/zyiINxAShzSH3TFSRvVPMIMuM4MrJ0p19oSKJ\n\
gLwQp1oF9H8SAeJdc03QjlpRS71P+VAu88D+Io5hW7fp3Lnm+8la69gxdTI6GB0r\n\
ay/XXf/Ul8Q+bGns6hkpZF6dgybyo9J+J+tVAoGBAIC/VybfM8GGzLMzByfZte8L\n\
zDTMNjGADHZ1ihgYgaDkYhc5Mib13N5ZnQs980AFXkd19J88jGYnSK2a20r+k9qe\n\
XGsCpJB32qMkd/LJMijo5G7c5MLAwpKN+enu8uOO9MBHatLcLVvh5SZw7XhO00ev\n\
vjwodCYaYnPJLffENaRtAoGBALXsVMoU//X2gMJ6qrZ1Ug72tclZTsuOLmrPTn6L\n\
Q4kK+qyVQWoJTNtddTvu0pxlTVjsfH6sd06CLA+I3eQfEkaiTpZIDrmqsXsbz11y\n\
cnDKV9jsFzPSUphGP8POWAHudA2ls45auTf5i92x01a/+JHrIhaerxPJUuvWi7nC\n\
2JwZAoGBALa+w6Cg4wHz5DS/ZP25HJUtiEqiBdgU4uQYnC240Vpiy+4zIuUzdVIC\n\
9Vw2DpWzMdCgZz1NeQ28ggVgeM+WH3036A1u90VAlNzsHXoYMfcsX2RUoZIKVB4I\n\
oFPZZrAeqT14qe0aJRtlJQWUO19g9TTQ0Nx9UHym5e1JITEPwTjF\n\
-----END RSA PRIVATE KEY-----\n";

pub(super) const EC_PRIVATE: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgsPaDjuwwGy7MMboo\n\
LI5A+IAg9zXY2VTNDiZz5sdSyGmhRANCAATUom4L8Mav4ktkzfp/Eu0P5oO4mfdv\n\
iS1t0RPH7dLgDGIVDBrVeQEts1QkNVyMCLnJz2mRgEfIaqUVVZUWspwm\n\
-----END PRIVATE KEY-----\n";

/// The identity provider's keys: RSA_PRIVATE's as `rsa-1` (RS256 only),
/// EC_PRIVATE's as `ec-1`, and keys that must verify nothing: RSA_OTHER's
/// for encryption only (`rsa-enc`), a shared secret (`hmac`, the bytes
/// `secret-secret-secret-secret-secret`), and a key type not known.
pub(super) const JWKS: &str = r#"{
  "keys": [
    {
      "kty": "RSA",
      "kid": "rsa-1",
      "use": "sig",
      "alg": "RS256",
      "n": "nNwzTwOZIMzgr7MBLOIUtsbOA82zSHAXI0Hj4MPxr0h6ssGSEk4wxUgIWPDSoU88yA5rGrPIj1jZbgP9DzFetyF78Mm9I2SDjxlfj2ZytrQQTLfjRawTYNTjf5MoUfUp2EaV1NY2KV2s-87N-jDUxMLSDmK0mC_1kjH2MpuBXeNbJwBxXLa-HpiCoyy75MQGIoiVtt-iL4gmJs_N7JUsZUsKErHboTa3xtgNGATFZz-UtacSQ5Id-DCrk-TcTkMxJuheoMLhRlyxTANK1GOa5PPu_FTjOeQ6-nky8YNHpuuUqTx-0f0pqhGrkQWkrU3rCP5ExIdfgbyVDv9fcl-uhw",
      "e": "AQAB"
    },
    {
      "kty": "EC",
      "kid": "ec-1",
      "use": "sig",
      "crv": "P-256",
      "x": "1KJuC_DGr-JLZM36fxLtD-aDuJn3b4ktbdETx-3S4Aw",
      "y": "YhUMGtV5AS2zVCQ1XIwIucnPaZGAR8hqpRVVlRaynCY"
    },
    {
      "kty": "RSA",
      "kid": "rsa-enc",
      "use": "enc",
      "n": "rDRXdArCB0zmBcsAucDeOwKG18VNEIiks66S2IXSxiQYBVnYzQWeHVDcauY0ZXWRLL7cvbc1pmDMkNWvpCLRHaH2iNOoAn5HEpemCTgtD58Y7g02DRUAW3pvXp-2sOce5vpx_FiBAxdS8Rvz8AC3GKUf_Ff0UZPNs48dGTMsyCbzAz3xlhWKvCbC2TwocgCJrHaC5pI1qDQpm26Cd0q5EXPcxXK9fVZevIU4EJWRBJR_zhJrGmQg7Tb6qc_TmiXIuK30-7eL_EuXSS9ON4JxYVuCs8EB_W9i6xoReoTdySdp86KnL7o5mlKbW8MtfbF1NSkMdvvIPrWZOkJHwQbr-Q",
      "e": "AQAB"
    },
    {
      "kty": "oct",
      "kid": "hmac",
      "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"
    },
    {
      "kty": "XYZ",
      "kid": "future"
    }
  ]
}"#;
