/** OAuth form bodies the RFC 6749 way (§3.1, §3.2): unknown parameters ignored, empty ones omitted, repeats refused. */
import { parseForm } from '../../api/routes/oauth/form';

it('ignores unrecognized parameters (even repeated), treats empty values as omitted, refuses a repeated parameter', () => {
  expect(parseForm('grant_type=client_credentials&scope=a%20b&x=1&x=2&=3&client_id=')).toEqual({
    grant_type: 'client_credentials',
    scope: 'a b'
  });
  expect(() => parseForm('token=a&token=b')).toThrow(/appears more than once/);
  expect(Object.getPrototypeOf(parseForm('__proto__=x&constructor=y'))).toBe(Object.prototype);
});
